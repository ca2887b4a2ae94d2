//! The ledger file this ledger opened, so that a write can tell when its
//! path no longer leads to it.
//!
//! SQLite keeps writing to a file that was deleted (or replaced by another
//! one at the same path) while it is open: in WAL mode it never notices,
//! and every commit lands in an unlinked inode that the next process will
//! not see. That process would then open an empty ledger at the path and
//! execute again what this one recorded. So a write is answered only if,
//! after its commit, the path still leads to the file opened: otherwise
//! the caller gets `Unavailable` and sends nothing (fail closed).

use std::path::{Path, PathBuf};

use crate::error::LedgerError;

/// The path and identity (device, inode) of the opened ledger file.
#[derive(Debug, Clone)]
pub(super) struct LedgerFile {
    path: PathBuf,
    /// `None` when the path is not a regular file (e.g. SQLite's
    /// `:memory:`): then there is nothing to lose and nothing to check.
    id: Option<FileId>,
}

type FileId = (u64, u64);

#[cfg(unix)]
fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Without inode numbers, a deleted file is still caught.
#[cfg(not(unix))]
fn file_id(path: &Path) -> Option<FileId> {
    path.is_file().then_some((0, 0))
}

impl LedgerFile {
    /// The file at `path`, as it is now (just opened).
    pub(super) fn opened(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            id: file_id(path),
        }
    }

    /// Whether the path still leads to the opened file.
    pub(super) fn check(&self) -> Result<(), LedgerError> {
        match self.id {
            Some(id) if file_id(&self.path) != Some(id) => Err(LedgerError::unavailable(
                "committing",
                format!(
                    "the ledger file {} was deleted or replaced after this process opened it; \
                     nothing written since is durable (restart on the right file)",
                    self.path.display()
                ),
            )),
            _ => Ok(()),
        }
    }
}
