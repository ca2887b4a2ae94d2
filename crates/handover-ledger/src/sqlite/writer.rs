//! How SQLite write transactions are run.
//!
//! **Group commit** (default): one task owns one write connection and runs
//! every queued job of a batch inside one `BEGIN IMMEDIATE … COMMIT`, one
//! after another. Nobody is answered before the COMMIT (and its fsync)
//! returns, so each answer is exactly as durable as with one transaction per
//! job, and each job still sees the effects of the ones before it (two
//! `begin`s of one key in one batch: one `started`, one `in_progress`). If
//! any write or the COMMIT fails, the whole batch is rolled back and every
//! caller in it gets [`LedgerError::Unavailable`]: fail closed.
//!
//! Jobs of every type share the queue: each is boxed with the channel its
//! own typed answer goes back on ([`Queued`]).
//!
//! **Direct**: each job takes a pool connection and its own
//! `BEGIN IMMEDIATE` transaction; SQLite's write lock serialises them.

use std::future::Future;
use std::pin::Pin;

use sqlx::{Executor, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::file::{CHECKING, LedgerFile};
use super::map_err;
use super::pending::Pending;
use super::store::{Cache, SqlStore, open_batch};
use crate::driver::{Config, Job, execute};
use crate::error::LedgerError;
use crate::identity::OperationId;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a batch failed, for every caller in it.
pub(super) struct Failure {
    context: &'static str,
    message: String,
}

impl Failure {
    fn new(context: &'static str, e: &dyn std::fmt::Display) -> Self {
        let message = e.to_string();
        tracing::warn!(context, error = %message, "ledger write failed; transaction rolled back");
        Self { context, message }
    }

    fn error(&self) -> LedgerError {
        LedgerError::Unavailable {
            context: self.context,
            message: self.message.clone(),
        }
    }
}

/// A job run in a batch: its answer to send after COMMIT, or the failed
/// write that makes the batch roll back (with the reply its caller waits on).
type Ran = Result<Box<dyn Reply>, (LedgerError, Box<dyn Reply>)>;

/// A job waiting for the writer, whatever its answer type.
pub(super) trait Queued: Send + Sync {
    /// Runs the job in the batch's open transaction. `Ok`: its answer, to
    /// be sent once the batch commits. `Err`: a write failed and the batch
    /// must be rolled back; the job's caller is still waiting.
    fn execute<'a>(
        self: Box<Self>,
        store: &'a mut SqlStore<'_>,
        cfg: &'a Config,
    ) -> BoxFuture<'a, Ran>;

    /// The record the job loads first, if known before it runs.
    fn loads(&self) -> Option<&OperationId>;

    /// The job was not run: its caller gets the batch's failure.
    fn fail(self: Box<Self>, failure: &Failure);
}

/// A typed answer waiting for the batch's COMMIT.
pub(super) trait Reply: Send {
    /// Sends the answer, or `failure` if the batch did not commit.
    fn send(self: Box<Self>, failure: Option<&Failure>);
}

type Answer<T> = Result<T, LedgerError>;

struct Waiting<J: Job> {
    job: J,
    reply: oneshot::Sender<Answer<J::Output>>,
}

struct Ready<T> {
    answer: Answer<T>,
    reply: oneshot::Sender<Answer<T>>,
}

impl<T: Send> Reply for Ready<T> {
    fn send(self: Box<Self>, failure: Option<&Failure>) {
        let answer = match failure {
            Some(f) => Err(f.error()),
            None => self.answer,
        };
        // The caller may have gone away; its answer is then simply dropped.
        let _ = self.reply.send(answer);
    }
}

/// A closed reply for a job whose answer cannot be delivered.
struct Failed<T>(oneshot::Sender<Answer<T>>);

impl<T: Send> Reply for Failed<T> {
    fn send(self: Box<Self>, failure: Option<&Failure>) {
        let e = failure.map_or_else(
            || LedgerError::unavailable("writing a batch", "the job failed"),
            Failure::error,
        );
        let _ = self.0.send(Err(e));
    }
}

impl<J: Job + 'static> Queued for Waiting<J> {
    fn execute<'a>(
        self: Box<Self>,
        store: &'a mut SqlStore<'_>,
        cfg: &'a Config,
    ) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            let Waiting { job, reply } = *self;
            match execute(&job, store, cfg).await {
                Ok(answer) => Ok(Box::new(Ready { answer, reply }) as Box<dyn Reply>),
                Err(e) => Err((e, Box::new(Failed(reply)) as Box<dyn Reply>)),
            }
        })
    }

    fn loads(&self) -> Option<&OperationId> {
        self.job.loads()
    }

    fn fail(self: Box<Self>, failure: &Failure) {
        let _ = self.reply.send(Err(failure.error()));
    }
}

/// `job` boxed for the queue, and where its answer will arrive.
pub(super) fn queue<J: Job + 'static>(
    job: J,
) -> (Box<dyn Queued>, oneshot::Receiver<Answer<J::Output>>) {
    let (reply, answer) = oneshot::channel();
    (Box::new(Waiting { job, reply }), answer)
}

/// Runs one job in its own transaction on `conn`.
async fn run_direct<J: Job>(
    conn: &mut SqliteConnection,
    job: &J,
    cfg: &Config,
    file: &LedgerFile,
) -> Answer<J::Output> {
    conn.execute("BEGIN IMMEDIATE")
        .await
        .map_err(|e| map_err("opening a write transaction", e))?;
    let mut pending = Pending::default();
    let mut store = SqlStore {
        conn: &mut *conn,
        cache: None,
        pending: &mut pending,
    };
    match execute(job, &mut store, cfg).await {
        Ok(answer) => {
            let committed = match file.check() {
                Err(why) => Err(LedgerError::unavailable(CHECKING, why)),
                Ok(()) => pending.commit(conn).await,
            };
            if let Err(e) = committed {
                let _ = conn.execute("ROLLBACK").await;
                tracing::warn!(error = %e, "ledger commit failed; transaction rolled back");
                return Err(e);
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
pub(super) async fn run_pooled<J: Job>(
    pool: &SqlitePool,
    job: &J,
    cfg: &Config,
    file: &LedgerFile,
) -> Answer<J::Output> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| map_err("acquiring a connection", e))?;
    run_direct(&mut conn, job, cfg, file).await
}

/// The group-commit loop; ends when every sender is dropped, or once
/// `stop` fires (or is dropped) and the jobs already queued have run (later
/// sends fail: the queue is closed). Then the connection is closed.
pub(super) async fn group_commit(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<Box<dyn Queued>>,
    mut stop: oneshot::Receiver<()>,
    cfg: Config,
    max_batch: usize,
    file: LedgerFile,
) {
    let mut batch: Vec<Box<dyn Queued>> = Vec::with_capacity(max_batch);
    let mut cache = Cache::default();
    let mut stopping = false;
    loop {
        let next = if stopping {
            rx.recv().await
        } else {
            tokio::select! {
                job = rx.recv() => job,
                _ = &mut stop => {
                    stopping = true;
                    rx.close();
                    continue;
                }
            }
        };
        let Some(first) = next else { break };
        batch.push(first);
        gather(&mut rx, &mut batch, max_batch).await;
        run_batch(&mut conn, &mut cache, &mut batch, &cfg, &file).await;
    }
    let _ = sqlx::Connection::close(conn).await;
}

/// Callers answered by the previous commit are usually about to enqueue
/// their next job. Yield (never sleep) while new jobs keep arriving, so
/// one commit serves all of them.
async fn gather(
    rx: &mut mpsc::Receiver<Box<dyn Queued>>,
    batch: &mut Vec<Box<dyn Queued>>,
    max_batch: usize,
) {
    loop {
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if batch.len() >= max_batch {
            return;
        }
        tokio::task::yield_now().await;
        if rx.is_empty() {
            return;
        }
    }
}

async fn run_batch(
    conn: &mut SqliteConnection,
    cache: &mut Cache,
    batch: &mut Vec<Box<dyn Queued>>,
    cfg: &Config,
    file: &LedgerFile,
) {
    let opened = open_batch(cache, conn, batch.iter().filter_map(|j| j.loads())).await;
    let mut jobs = batch.drain(..);
    if let Err(e) = opened {
        let _ = conn.execute("ROLLBACK").await;
        cache.clear();
        let failure = Failure::new("opening a write transaction", &e);
        jobs.for_each(|j| j.fail(&failure));
        return;
    }
    let mut pending = Pending::default();
    let mut done: Vec<Box<dyn Reply>> = Vec::new();
    while let Some(job) = jobs.next() {
        let mut store = SqlStore {
            conn: &mut *conn,
            cache: Some(&mut *cache),
            pending: &mut pending,
        };
        match job.execute(&mut store, cfg).await {
            Ok(reply) => done.push(reply),
            Err((e, reply)) => {
                let _ = conn.execute("ROLLBACK").await;
                cache.clear();
                let failure = Failure::new("writing a batch", &e);
                done.into_iter()
                    .chain(std::iter::once(reply))
                    .for_each(|r| r.send(Some(&failure)));
                jobs.for_each(|j| j.fail(&failure));
                return;
            }
        }
    }
    let failure = commit_batch(conn, &mut pending, file).await.err();
    if failure.is_some() {
        let _ = conn.execute("ROLLBACK").await;
        cache.clear();
    }
    for reply in done {
        reply.send(failure.as_ref());
    }
}

/// Checks the file is still the ledger, then writes what the batch holds
/// and commits.
async fn commit_batch(
    conn: &mut SqliteConnection,
    pending: &mut Pending,
    file: &LedgerFile,
) -> Result<(), Failure> {
    file.check().map_err(|why| Failure::new(CHECKING, &why))?;
    pending
        .commit(conn)
        .await
        .map_err(|e| Failure::new("committing a batch", &e))
}
