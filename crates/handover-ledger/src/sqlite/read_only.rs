//! A ledger opened for reading only (`SqliteOptions::read_only`): what it
//! checks on open, and how reads answer without recording anything.

use sqlx::SqlitePool;
use sqlx::migrate::Migrator;

use crate::error::{LedgerError, ValidationError};

/// The file is a Handover ledger with every migration this version knows
/// applied; anything else is refused, naming `path` (never "empty ledger").
pub(super) async fn verify(pool: &SqlitePool, migrator: &Migrator) -> Result<(), LedgerError> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('operations', 'attempts', '_sqlx_migrations')",
    )
    .fetch_all(pool)
    .await
    .map_err(unreadable)?;
    if tables.len() < 3 {
        return Err(not_a_ledger(
            "the file has no Handover ledger tables (operations, attempts)",
        ));
    }
    let applied: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await
            .map_err(|e| super::map_err("reading the ledger's schema version", e))?;
    match crate::schema::version_problem(applied, migrator) {
        Some(why) => Err(not_a_ledger(why)),
        None => Ok(()),
    }
}

/// Why the first read of the file failed: SQLite's "not a database"
/// (`SQLITE_NOTADB`) refuses the file; anything else is the store being
/// unreadable here, most often a ledger in WAL mode, whose readers need
/// its `-shm` file, in a directory this user may not write.
fn unreadable(e: sqlx::Error) -> LedgerError {
    let code = e.as_database_error().and_then(|d| d.code());
    if code.as_deref() == Some("26") {
        return not_a_ledger("the file is not a SQLite database");
    }
    LedgerError::unavailable(
        "reading the ledger file",
        format!(
            "{e}; a ledger in WAL mode is read through its -shm file, which needs a directory this user may write (or the -shm file already there)"
        ),
    )
}

/// A ledger a newer version migrated: this version might misread its
/// records and must not write them.
pub(super) fn newer_schema() -> LedgerError {
    not_a_ledger(crate::schema::NEWER)
}

pub(super) fn not_a_ledger(why: &str) -> LedgerError {
    ValidationError::new("path", format!("not a Handover ledger: {why}")).into()
}
