//! Whether a store holds a ledger at the schema this version writes: the
//! one check a backend makes before using a ledger it must not create or
//! migrate (a read-only SQLite open, a PostgreSQL open of an existing
//! ledger only).

use sqlx::migrate::Migrator;

/// Why a store whose newest applied migration is `applied` cannot be
/// used as it is by this version, whose migrations are `migrator`'s.
pub(crate) fn version_problem(applied: Option<i64>, migrator: &Migrator) -> Option<&'static str> {
    let known = migrator.iter().map(|m| m.version).max();
    if applied > known {
        Some(NEWER)
    } else if applied < known {
        Some(
            "the ledger's schema is older than this version (open it read-write once to migrate it)",
        )
    } else {
        None
    }
}

/// A ledger a newer version migrated: this version might misread its
/// records and must not write them.
pub(crate) const NEWER: &str =
    "the ledger's schema is newer than this version (upgrade Handover to open it)";
