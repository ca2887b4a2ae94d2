//! The file a [`super::SqliteLedger`] opened, checked before every commit.
//!
//! SQLite keeps writing to an open file after it was deleted, moved or
//! replaced: every commit succeeds, into an inode nobody will open again,
//! and the next start finds an empty (or another) ledger — claims and
//! dispatches forgotten, so an action that may have been sent could be
//! sent again. So each write transaction checks, right before its COMMIT,
//! that the path still names the file opened; if not, it rolls back and
//! the caller gets `Unavailable` (fail closed: no claim, nothing sent).

use std::path::{Path, PathBuf};

use crate::error::LedgerError;

/// What a failed check is reported as ([`LedgerError::Unavailable`]'s context).
pub(super) const CHECKING: &str = "checking the ledger file";

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
