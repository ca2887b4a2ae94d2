//! The shared conformance suite, once per backend.

mod memory {
    use std::sync::Arc;

    use handover_ledger::MemoryLedger;
    use handover_ledger::conformance::{Setup, Subject};

    async fn make(s: Setup) -> Subject {
        Subject::new(Arc::new(MemoryLedger::new(
            Arc::new(s.clock),
            s.retention,
            s.limits,
        )))
    }

    handover_ledger::conformance_tests!(make);
}

mod sqlite {
    use std::sync::Arc;

    use handover_ledger::conformance::{Setup, Subject};
    use handover_ledger::{SqliteLedger, SqliteOptions};

    async fn make(s: Setup) -> Subject {
        let dir = tempfile::tempdir().expect("temp dir");
        let ledger = SqliteLedger::open(
            dir.path().join("ledger.db"),
            SqliteOptions {
                clock: Arc::new(s.clock),
                retention: s.retention,
                limits: s.limits,
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("open sqlite ledger");
        Subject {
            ledger: Arc::new(ledger),
            guard: Box::new(dir),
        }
    }

    handover_ledger::conformance_tests!(make);
}

/// The same suite with one transaction per command (no group commit).
mod sqlite_direct {
    use std::sync::Arc;

    use handover_ledger::conformance::{Setup, Subject};
    use handover_ledger::{SqliteLedger, SqliteOptions};

    async fn make(s: Setup) -> Subject {
        let dir = tempfile::tempdir().expect("temp dir");
        let ledger = SqliteLedger::open(
            dir.path().join("ledger.db"),
            SqliteOptions {
                clock: Arc::new(s.clock),
                retention: s.retention,
                limits: s.limits,
                group_commit: false,
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("open sqlite ledger");
        Subject {
            ledger: Arc::new(ledger),
            guard: Box::new(dir),
        }
    }

    handover_ledger::conformance_tests!(make);
}

use crate::postgres_support;

/// The same suite on PostgreSQL, each test in its own schema; skipped
/// (with a notice) when `HANDOVER_TEST_POSTGRES_URL` is not set.
mod postgres {
    use std::sync::Arc;

    use handover_ledger::PostgresOptions;
    use handover_ledger::conformance::{Setup, Subject};

    use super::postgres_support as pg;

    async fn make(s: Setup) -> Subject {
        let (ledger, guard) = pg::ledger(PostgresOptions {
            clock: Arc::new(s.clock),
            retention: s.retention,
            limits: s.limits,
            max_connections: 4,
            ..PostgresOptions::default()
        })
        .await;
        Subject {
            ledger: Arc::new(ledger),
            guard: Box::new(guard),
        }
    }

    handover_ledger::conformance_tests!(make, enabled = pg::enabled);
}
