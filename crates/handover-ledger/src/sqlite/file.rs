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

/// The path and identity (device, inode) of the opened ledger file.
#[derive(Debug, Clone)]
pub(super) struct LedgerFile {
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl LedgerFile {
    /// The file now at `path` (made absolute, so a later change of the
    /// working directory changes nothing).
    pub(super) fn opened(path: &Path) -> Result<Self, LedgerError> {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let id =
            identity(&path).map_err(|e| LedgerError::unavailable(CHECKING, gone(&path, &e)))?;
        Ok(Self { path, id })
    }

    /// `Ok` if the path still names the file that was opened; otherwise
    /// why not, naming the path.
    pub(super) fn check(&self) -> Result<(), String> {
        match identity(&self.path) {
            Ok(id) if id == self.id => Ok(()),
            Ok(_) => Err(gone(&self.path, &"another file is there now")),
            Err(e) => Err(gone(&self.path, &e)),
        }
    }
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
