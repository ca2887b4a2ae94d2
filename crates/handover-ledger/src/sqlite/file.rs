//! The file a [`super::SqliteLedger`] opens: looked at before it is
//! opened read-write, and checked before every commit.
//!
//! Before a read-write open, the file is looked at read-only: a file that
//! is not SQLite or holds another application's tables is refused and
//! left byte for byte as it was (opening it would switch it to WAL and add
//! our tables, or half of them when a migration collides with a table of
//! the same name). A missing or empty file, an SQLite database without
//! tables and a Handover ledger (of any schema version) are opened.
//!
//! SQLite keeps writing to an open file after it was deleted, moved or
//! replaced: every commit succeeds, into an inode nobody will open again,
//! and the next start finds an empty (or another) ledger — claims and
//! dispatches forgotten, so an action that may have been sent could be
//! sent again. So each write transaction checks, right before its COMMIT,
//! that the path still names the file opened; if not, it rolls back and
//! the caller gets `Unavailable` (fail closed: no claim, nothing sent).
//! The same holds for the write-ahead log (`-wal`), which in WAL mode
//! holds every commit since the last checkpoint: deleted while open,
//! SQLite goes on committing into the unlinked log, and a crash loses
//! every one of those records. The log keeps its inode while any
//! connection has the file open (SQLite deletes it only when the last
//! one closes), and a ledger always keeps one open: the group-commit
//! writer's, or a connection held for the purpose.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

use crate::error::LedgerError;

/// What a failed check is reported as ([`LedgerError::Unavailable`]'s context).
pub(super) const CHECKING: &str = "checking the ledger file";

/// `Ok` if opening `path` read-write makes or keeps it a Handover ledger;
/// otherwise "not a Handover ledger", and the file is untouched.
pub(super) async fn adoptable(path: &Path) -> Result<(), LedgerError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(super::read_only::not_a_ledger(
                "it is a directory (name a file in it)",
            ));
        }
        Ok(meta) if meta.len() > 0 => {}
        // Missing (created by the open) or empty (becomes the ledger).
        _ => return Ok(()),
    }
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false)
        .connect()
        .await
        .map_err(|e| super::map_err("looking at the ledger file", e))?;
    let tables: Result<Vec<String>, _> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await;
    let _ = sqlx::Connection::close(conn).await;
    let tables =
        tables.map_err(|_| super::read_only::not_a_ledger("the file is not a SQLite database"))?;
    let ours = ["_sqlx_migrations", "operations"]
        .iter()
        .all(|t| tables.iter().any(|name| name == t));
    if tables.is_empty() || ours {
        return Ok(());
    }
    let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
    Err(super::read_only::not_a_ledger(&format!(
        "it is another database (tables {}{}); nothing was written to it",
        shown.join(", "),
        if tables.len() > shown.len() {
            ", ..."
        } else {
            ""
        }
    )))
}

/// `Ok` if a write transaction on `pool` can change the file; otherwise
/// why not, naming the file.
///
/// SQLite opens a file it may not write (a read-only file, directory or
/// mount, a `-wal`/`-shm` owned by someone else) read-only without a word,
/// and `BEGIN IMMEDIATE` alone still succeeds there: only a write is
/// refused. Without this check a read-write open succeeded and every
/// later write failed as `Unavailable`, for ever, behind a healthy-looking
/// service. The probe write is rolled back: nothing is left in the file.
pub(super) async fn writable(pool: &sqlx::SqlitePool, path: &Path) -> Result<(), LedgerError> {
    use sqlx::Executor;
    let cannot = |e: sqlx::Error| {
        // SQLITE_BUSY: another connection holds the write lock past the
        // busy timeout, which permissions have nothing to do with.
        let busy = e.as_database_error().and_then(|d| d.code()).as_deref() == Some("5");
        let hint = if busy {
            "another process holds its write lock; try again when it is done"
        } else {
            "check the permissions of the file, its -wal and -shm files and its directory, and that the file system is not mounted read-only"
        };
        LedgerError::unavailable(
            "opening the ledger file",
            format!(
                "{}: the ledger cannot be written ({e}); {hint}",
                path.display()
            ),
        )
    };
    let mut conn = pool.acquire().await.map_err(cannot)?;
    conn.execute("BEGIN IMMEDIATE").await.map_err(cannot)?;
    let probe = conn
        .execute("CREATE TABLE main.handover_write_check (x)")
        .await;
    let rolled_back = conn.execute("ROLLBACK").await;
    probe.map_err(cannot)?;
    rolled_back.map(drop).map_err(cannot)
}

/// Switches the closed ledger `file` from WAL to the rollback journal (see
/// [`super::SqliteLedger::close`]). Never waits for another process: one
/// that still has the file open keeps it in WAL mode (logged).
pub(super) async fn fold_wal(file: &LedgerFile) {
    let opened = SqliteConnectOptions::new()
        .filename(&file.path)
        .create_if_missing(false)
        .busy_timeout(Duration::ZERO)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Delete)
        .connect()
        .await;
    match opened {
        Ok(conn) => {
            let _ = sqlx::Connection::close(conn).await;
        }
        Err(e) => tracing::info!(
            path = %file.path.display(),
            error = %e,
            "the ledger file stays in WAL mode (another process has it open; its close folds the log in)"
        ),
    }
}

/// Held while a read-write open looks at, creates and migrates the file.
///
/// Processes opening one new ledger at once (two `serve`s, a `demo`
/// started twice) take turns, so the later ones find the first one's
/// whole schema instead of colliding with its migration half-way ("table
/// operations already exists") or taking its half-made tables for another
/// application's. An advisory `flock` on the file's directory: nothing is
/// created for it, and the kernel releases it when the guard drops or the
/// process dies. `None` where the directory cannot be opened or locked
/// (the open itself then reports the real cause).
pub(super) async fn open_lock(
    path: &Path,
    deadline: Duration,
) -> Result<Option<std::fs::File>, LedgerError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(dir) = std::fs::File::open(dir) else {
        return Ok(None);
    };
    // A blocking `flock` on a blocking thread, bounded by the deadline (a
    // thread still waiting past it takes the lock when it comes free and
    // drops it at once: its answer is dropped with the abandoned task).
    let locked = tokio::task::spawn_blocking(move || dir.lock().map(|()| dir));
    match tokio::time::timeout(deadline, locked).await {
        Ok(Ok(Ok(dir))) => Ok(Some(dir)),
        Ok(_) => Ok(None),
        Err(_) => Err(LedgerError::unavailable(
            "opening the ledger file",
            format!(
                "{}: another process kept opening a ledger in this directory for longer than {deadline:?}",
                path.display()
            ),
        )),
    }
}

/// The path and identity (device, inode) of the opened ledger file, and
/// of its write-ahead log.
#[derive(Debug, Clone)]
pub(super) struct LedgerFile {
    path: PathBuf,
    id: Option<(u64, u64)>,
    /// `-wal` and its identity, when it existed at the open (a ledger
    /// opened read-write is in WAL mode, so it does).
    wal: Option<(PathBuf, Option<(u64, u64)>)>,
}

impl LedgerFile {
    /// The file now at `path` (made absolute, so a later change of the
    /// working directory changes nothing), with its write-ahead log.
    pub(super) fn opened(path: &Path) -> Result<Self, LedgerError> {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let id =
            identity(&path).map_err(|e| LedgerError::unavailable(CHECKING, gone(&path, &e)))?;
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        let wal = identity(&wal).ok().map(|id| (wal, id));
        Ok(Self { path, id, wal })
    }

    /// `Ok` if the path still names the file that was opened, and its
    /// `-wal` the log that was; otherwise why not, naming the path.
    pub(super) fn check(&self) -> Result<(), String> {
        let same = |path: &Path, opened: Option<(u64, u64)>| match identity(path) {
            Ok(id) if id == opened => Ok(()),
            Ok(_) => Err(gone(path, &"another file is there now")),
            Err(e) => Err(gone(path, &e)),
        };
        same(&self.path, self.id)?;
        match &self.wal {
            Some((wal, id)) => same(wal, *id).map_err(|_| log_gone(wal)),
            None => Ok(()),
        }
    }
}

/// The write-ahead log's own advice: it cannot be restored, but this
/// process still holds it open, and a clean stop writes what it holds
/// into the main file.
fn log_gone(wal: &Path) -> String {
    format!(
        "the ledger's write-ahead log {} was deleted, moved or replaced while open; nothing was recorded. \
         Stop this process cleanly (SIGTERM, not kill -9): closing writes the records the log still holds into the main file",
        wal.display()
    )
}

fn gone(path: &Path, why: &dyn std::fmt::Display) -> String {
    format!(
        "the ledger file {} was deleted, moved or replaced while open ({why}); nothing was recorded (restore it and restart)",
        path.display()
    )
}

#[cfg(unix)]
fn identity(path: &Path) -> std::io::Result<Option<(u64, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    Ok(Some((meta.dev(), meta.ino())))
}

/// Without inode numbers only a missing file is noticed.
#[cfg(not(unix))]
fn identity(path: &Path) -> std::io::Result<Option<(u64, u64)>> {
    std::fs::metadata(path).map(|_| None)
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    use super::writable;

    async fn pool(path: &std::path::Path, read_only: bool) -> sqlx::SqlitePool {
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(!read_only)
            .read_only(read_only);
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts)
            .await
            .expect("open")
    }

    /// A connection SQLite opened read-only (as it silently does for a
    /// file the process may not write, which root never meets) fails the
    /// check with the file and the cause; a writable one passes, and the
    /// probe leaves no table behind.
    #[tokio::test]
    async fn writable_names_the_file_and_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let rw = pool(&path, false).await;
        writable(&rw, &path).await.expect("a writable file");
        let tables: Vec<String> = sqlx::query_scalar("SELECT name FROM sqlite_master")
            .fetch_all(&rw)
            .await
            .unwrap();
        assert!(tables.is_empty(), "the probe was rolled back: {tables:?}");
        rw.close().await;

        let ro = pool(&path, true).await;
        let err = writable(&ro, &path).await.expect_err("a read-only file");
        let text = err.to_string();
        assert!(err.is_unavailable(), "{err:?}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("readonly"), "{text}");
    }
}
