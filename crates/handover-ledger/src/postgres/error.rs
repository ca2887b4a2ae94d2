//! Driver errors mapped to portable kinds: nobody above this module sees a
//! SQLSTATE.

use crate::error::LedgerError;

/// Why a transaction was rolled back to be run again (nothing of it committed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Retry {
    /// Another transaction inserted or changed the row first.
    ConcurrentWrite,
    /// The server aborted the transaction (serialization failure, deadlock).
    Aborted,
    /// The connection failed before the transaction started.
    NotStarted,
    /// The answer came from the ledger's cache and no write confirmed it.
    Unconfirmed,
}

impl Retry {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::ConcurrentWrite => "another transaction wrote the operation first",
            Self::Aborted => {
                "the server aborted the transaction (serialization failure or deadlock)"
            }
            Self::NotStarted => "the connection failed before the transaction started",
            Self::Unconfirmed => "a cached record was not confirmed by a write",
        }
    }
}

/// Maps a driver error; `Some(Retry)` when re-running the whole transaction is
/// safe because the server rolled it back.
pub(super) fn map_err(context: &'static str, e: sqlx::Error) -> (LedgerError, Option<Retry>) {
    match e {
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_) => {
            (LedgerError::corrupt(format!("while {context}: {e}")), None)
        }
        sqlx::Error::Database(ref db) => {
            // 40001 serialization_failure, 40P01 deadlock_detected: the
            // server rolled the transaction back; running it again is safe.
            let retry =
                matches!(db.code().as_deref(), Some("40001" | "40P01")).then_some(Retry::Aborted);
            (LedgerError::unavailable(context, describe(&e)), retry)
        }
        other => (LedgerError::unavailable(context, describe(&other)), None),
    }
}

/// A driver error as users read it. sqlx writes a server error as "error
/// returned from database: MESSAGE at line N", where N is a line of the
/// PostgreSQL server's own C source (the `L` field of the error): noise to
/// anyone running Handover. We write the server's message alone, from the
/// typed field; nothing here is parsed, and nothing classifies by this
/// text (`map_err` reads the code).
pub(super) fn describe(e: &sqlx::Error) -> String {
    match e.as_database_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}

/// [`describe`] for the migrator's errors, which wrap a driver error.
pub(super) fn describe_migration(e: &sqlx::migrate::MigrateError) -> String {
    use sqlx::migrate::MigrateError;
    match e {
        MigrateError::Execute(inner) => describe(inner),
        MigrateError::ExecuteMigration(inner, version) => {
            format!("migration {version}: {}", describe(inner))
        }
        other => other.to_string(),
    }
}

/// [`map_err`] without the retry hint.
pub(super) fn unavailable(context: &'static str, e: sqlx::Error) -> LedgerError {
    map_err(context, e).0
}
