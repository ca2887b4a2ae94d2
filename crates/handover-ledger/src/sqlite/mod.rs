//! SQLite backend: one file, WAL journal, `synchronous = FULL` (every commit
//! is fsync'd before anyone is answered), `BEGIN IMMEDIATE` for every write,
//! versioned migrations (`migrations/sqlite`).
//!
//! Reads (`get`, `list`, `attempts`) use a connection pool and only go
//! through a write transaction when a lease expiry must be recorded first.
//! Several `SqliteLedger`s (in one process or many) may open the same file:
//! every check-and-claim runs under SQLite's write lock.

mod file;
mod pending;
mod read_only;
mod store;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, SqlitePool};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::clock::{Clock, SystemClock};
use crate::driver::jobs::{self, SettleDue};
use crate::driver::{Backend, Config, Job, answer_read_only};
use crate::error::{LedgerError, ValidationError};
use crate::identity::{Limits, OperationId};
use crate::ledger::ListFilter;
use crate::model::{AttemptRecord, OperationRecord};
use crate::retention::Retention;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Maps a driver error to a portable kind; nothing above sees SQLite codes.
pub(crate) fn map_err(context: &'static str, e: sqlx::Error) -> LedgerError {
    match e {
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_) => LedgerError::corrupt(format!("while {context}: {e}")),
        other => LedgerError::unavailable(context, other),
    }
}

/// Opening failed: the error names the file (and a missing directory,
/// the usual cause), which SQLite's own text ("unable to open database
/// file") does not.
fn open_failed(path: &Path, context: &'static str, e: sqlx::Error) -> LedgerError {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let why = match dir {
        Some(d) if !d.is_dir() => format!("{e} (the directory {} does not exist)", d.display()),
        _ => e.to_string(),
    };
    LedgerError::unavailable(context, format!("{}: {why}", path.display()))
}

/// How to open a [`SqliteLedger`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Time source for leases and retention.
    pub clock: Arc<dyn Clock>,
    /// Retention windows.
    pub retention: Retention,
    /// Size/depth limits for results and metadata.
    pub limits: Limits,
    /// Read pool size (and, without group commit, the writers' pool) (default 4).
    pub max_connections: u32,
    /// How long a write waits for SQLite's lock held by another connection,
    /// and an open for another process opening a ledger in the same
    /// directory (default 5 s).
    pub busy_timeout: Duration,
    /// Group commit: batch concurrent writes into one durable transaction (default on).
    pub group_commit: bool,
    /// Largest group-commit batch (default 256).
    pub max_batch: usize,
    /// Open an existing ledger for reading only (default off): nothing is
    /// created, migrated or written, a file that is not a current Handover
    /// ledger is refused, and writes fail with `Unavailable`. Reads show
    /// records as a read-write open would settle them (a passed lease after
    /// dispatch reads as `unknown`) without recording it. For inspection
    /// tools (`handover ops list|show`), including on read-only media.
    pub read_only: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            retention: Retention::default(),
            limits: Limits::default(),
            max_connections: 4,
            busy_timeout: Duration::from_secs(5),
            group_commit: true,
            max_batch: 256,
            read_only: false,
        }
    }
}

#[derive(Debug)]
enum Writes {
    Batched {
        queue: mpsc::Sender<Box<dyn writer::Queued>>,
        /// Taken by [`SqliteLedger::close`]: tells the writer to finish
        /// what is queued and close its connection, then waits for it.
        writer: std::sync::Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
    },
    Direct,
}

/// The durable, embedded ledger.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use handover_ledger::*;
/// use serde_json::json;
/// use std::time::Duration;
///
/// let dir = tempfile::tempdir().unwrap();
/// let ledger = SqliteLedger::open(dir.path().join("ledger.db"), SqliteOptions::default()).await?;
/// let req = OperationRequest::new("tenant-1", "K-701", "create_shipment",
///     &json!({"order": 42}), &Limits::default())?;
/// let opts = BeginOptions::new("executor-a", Duration::from_secs(30));
/// assert!(matches!(ledger.begin(&req, &opts).await?, BeginOutcome::Started(_)));
/// assert!(matches!(ledger.begin(&req, &opts).await?, BeginOutcome::InProgress { .. }));
/// # Ok::<(), LedgerError>(()) }).unwrap();
/// ```
#[derive(Debug)]
pub struct SqliteLedger {
    pool: SqlitePool,
    writes: Writes,
    cfg: Config,
    read_only: bool,
    /// Without group commit, a connection held open so the write-ahead
    /// log keeps its inode (see `file`); closed by [`Self::close`].
    keeper: std::sync::Mutex<Option<sqlx::SqliteConnection>>,
    /// The file writes go to (`None` when read-only), checked before every commit.
    file: Option<file::LedgerFile>,
}

impl SqliteLedger {
    /// Opens (creating if missing) the ledger file at `path` and applies
    /// migrations; with [`SqliteOptions::read_only`], opens an existing
    /// ledger for reading only. A file that is not a Handover ledger (not
    /// SQLite, or another application's database) is refused ("not a
    /// Handover ledger", a validation error on `path`) and left as it was.
    /// A read-write open that cannot write the file (permissions, a
    /// read-only file system) fails with `Unavailable` naming the file and
    /// the cause, instead of opening read-only and failing every write.
    pub async fn open(path: impl AsRef<Path>, opts: SqliteOptions) -> Result<Self, LedgerError> {
        if path.as_ref().to_str().is_none() {
            // Refused before anything touches the file system (SQLite itself
            // refuses such a name only after a file was created).
            let why = "must be valid UTF-8 (SQLite takes file names as UTF-8)";
            return Err(ValidationError::new("path", why).into());
        }
        if opts.read_only {
            return Self::open_read_only(path.as_ref(), opts).await;
        }
        let lock = file::open_lock(path.as_ref(), opts.busy_timeout).await?;
        file::adoptable(path.as_ref()).await?;
        let connect = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(opts.busy_timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .connect_with(connect.clone())
            .await
            .map_err(|e| open_failed(path.as_ref(), "opening the ledger file", e))?;
        file::writable(&pool, path.as_ref()).await?;
        MIGRATOR.run(&pool).await.map_err(|e| match e {
            // A version in the file that this build does not know.
            sqlx::migrate::MigrateError::VersionMissing(_) => read_only::newer_schema(),
            e => LedgerError::unavailable("applying migrations", e),
        })?;
        drop(lock);
        let file = file::LedgerFile::opened(path.as_ref())?;
        let cfg = Config {
            clock: opts.clock,
            retention: opts.retention,
            limits: opts.limits,
        };
        // In group-commit mode the writer's connection stays open for the
        // ledger's life; without it, one is held for that alone, so the
        // pool closing its idle connections never makes SQLite delete
        // the log the commit check watches (see `file`).
        let mut keeper = None;
        let writes = if opts.group_commit {
            let conn = connect
                .connect()
                .await
                .map_err(|e| map_err("opening the write connection", e))?;
            let (queue, rx) = mpsc::channel(opts.max_batch.max(1) * 4);
            let (stop, stopped) = oneshot::channel();
            let task = tokio::spawn(writer::group_commit(
                conn,
                rx,
                stopped,
                cfg.clone(),
                opts.max_batch.max(1),
                file.clone(),
            ));
            Writes::Batched {
                queue,
                writer: std::sync::Mutex::new(Some((stop, task))),
            }
        } else {
            let conn = connect
                .connect()
                .await
                .map_err(|e| map_err("opening the connection that keeps the log", e))?;
            keeper = Some(conn);
            Writes::Direct
        };
        Ok(Self {
            pool,
            writes,
            cfg,
            read_only: false,
            file: Some(file),
            keeper: std::sync::Mutex::new(keeper),
        })
    }

    async fn open_read_only(path: &Path, opts: SqliteOptions) -> Result<Self, LedgerError> {
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(opts.busy_timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .connect_with(connect)
            .await
            .map_err(|e| open_failed(path, "opening the ledger file read-only", e))?;
        read_only::verify(&pool, &MIGRATOR).await?;
        Ok(Self {
            pool,
            writes: Writes::Direct,
            cfg: Config {
                clock: opts.clock,
                retention: opts.retention,
                limits: opts.limits,
            },
            read_only: true,
            file: None,
            keeper: std::sync::Mutex::new(None),
        })
    }

    /// Closes the ledger so that the main file alone holds every record:
    /// writes already queued are committed, the write connection and the
    /// pool are closed (waiting for connections in use to come back), then
    /// the file is switched back from WAL to SQLite's rollback journal,
    /// which folds the write-ahead log in and removes `-wal` and `-shm`.
    /// The file left is a plain SQLite database: a copy of it alone holds
    /// every record, and it can be read where nothing can be written
    /// (a read-only directory or medium, another user's file), which a
    /// WAL-mode file without its `-shm` cannot. The next read-write open
    /// switches it to WAL again.
    ///
    /// Dropping the ledger instead left every record only in `-wal` when
    /// the process exited (the runtime stops before the connections
    /// close): durable, but the `.db` file alone was an empty database.
    /// While another process has the file open it keeps WAL mode, and its
    /// own close folds the log in. Later calls fail with `Unavailable`;
    /// closing again does nothing.
    pub async fn close(&self) {
        if let Writes::Batched { writer, .. } = &self.writes {
            let taken = writer.lock().ok().and_then(|mut w| w.take());
            if let Some((stop, task)) = taken {
                let _ = stop.send(());
                let _ = task.await;
            }
        }
        let keeper = self.keeper.lock().ok().and_then(|mut k| k.take());
        if let Some(conn) = keeper {
            let _ = sqlx::Connection::close(conn).await;
        }
        if self.pool.is_closed() {
            return;
        }
        self.pool.close().await;
        if let Some(file) = self.file.as_ref().filter(|_| !self.read_only) {
            file::fold_wal(file).await;
        }
    }
}

impl Backend for SqliteLedger {
    async fn close_store(&self) {
        self.close().await;
    }

    async fn run<J: Job + 'static>(&self, job: J) -> Result<J::Output, LedgerError> {
        let Some(file) = self.file.as_ref().filter(|_| !self.read_only) else {
            return Err(crate::driver::read_only_refused());
        };
        match &self.writes {
            Writes::Direct => writer::run_pooled(&self.pool, &job, &self.cfg, file).await,
            Writes::Batched { queue, .. } => {
                let (queued, answer) = writer::queue(job);
                queue
                    .send(queued)
                    .await
                    .map_err(|_| LedgerError::unavailable("queueing a write", "writer stopped"))?;
                answer
                    .await
                    .map_err(|_| LedgerError::unavailable("awaiting a write", "writer stopped"))?
            }
        }
    }

    /// From a pool connection; through the writer only when a lease expiry
    /// must be recorded first.
    async fn get_record(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        let job = jobs::get(id);
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| map_err("acquiring a connection", e))?;
        // Planning only reads: nothing is ever held here.
        let mut pending = pending::Pending::default();
        let mut store = store::SqlStore {
            conn: &mut conn,
            cache: None,
            pending: &mut pending,
        };
        if self.read_only {
            return crate::driver::answer_unrecorded(&job, &mut store, &self.cfg).await;
        }
        match answer_read_only(&job, &mut store, &self.cfg).await {
            Some(answer) => answer,
            None => {
                drop(conn);
                self.run(job).await
            }
        }
    }

    async fn list_records(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError> {
        let now = self.cfg.clock.now();
        let due = sqlx::query(store::ANY_DUE)
            .bind(now.0)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| map_err("listing operations", e))?;
        if due.is_some() && !self.read_only {
            self.run(SettleDue).await?;
        }
        let records = store::list_query(filter, now)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| map_err("listing operations", e))?
            .into_iter()
            .map(crate::row::OperationRow::into_record);
        if self.read_only {
            // Settled in memory only; the filter ran on the stored state.
            return records
                .map(|r| r.map(|r| crate::driver::settled(r, &self.cfg)))
                .collect();
        }
        records.collect()
    }

    async fn attempt_log(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError> {
        self.get_record(id).await?;
        sqlx::query_as::<_, crate::row::AttemptRow>(store::ATTEMPTS)
            .bind(id.scope.as_str())
            .bind(id.key.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(|e| map_err("reading attempts", e))?
            .into_iter()
            .map(crate::row::AttemptRow::into_record)
            .collect()
    }
}
