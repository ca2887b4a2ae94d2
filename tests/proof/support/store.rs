//! The ledger under test, per backend, with a shared manual clock and a way
//! to "restart the process" (drop every handle, open the same store anew).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use handover::ledger::{
    Ledger, Limits, ListFilter, ManualClock, MemoryLedger, OperationId, OperationRecord,
    PostgresLedger, PostgresOptions, Retention, SqliteLedger, SqliteOptions, Timestamp,
};
use handover::router::config::Config;
use handover::router::gate::WriteGate;

/// Which ledger backend a scenario runs on.
#[derive(Debug, Clone)]
pub enum Backend {
    /// In-process; not durable, so it has no restart.
    Memory,
    /// A SQLite file in a temporary directory.
    Sqlite,
    /// A fresh schema in the PostgreSQL database at this URL
    /// (`HANDOVER_TEST_POSTGRES_URL`).
    Postgres(String),
}

impl Backend {
    /// PostgreSQL on `HANDOVER_TEST_POSTGRES_URL`, if it is set.
    pub fn postgres() -> Option<Backend> {
        std::env::var("HANDOVER_TEST_POSTGRES_URL")
            .ok()
            .map(Backend::Postgres)
    }
}

/// A ledger store that outlives ledger instances (the file, the database),
/// the clock both the ledger and the destination read, and the ledger
/// instance of the current "process".
pub struct Store {
    pub backend: Backend,
    pub clock: ManualClock,
    ledger: Arc<dyn Ledger>,
    place: Place,
    _dir: tempfile::TempDir,
}

/// Where a store's data lives, so a restart can open it again.
enum Place {
    Memory,
    File(PathBuf),
    Schema { url: String, schema: String },
}

/// A schema name unique to this test process and store: scenarios reuse
/// identities (`customer-42`/`K-701`) and run in parallel.
fn fresh_schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "proof_{}_{}_{}",
        std::process::id(),
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A realistic start time (2023-11-14), so ages and windows read naturally.
pub const T0: i64 = 1_700_000_000_000;

impl Store {
    /// A fresh, empty store on `backend`.
    pub async fn open(backend: Backend) -> Store {
        let dir = tempfile::tempdir().expect("temporary directory");
        let clock = ManualClock::new(Timestamp::from_millis(T0));
        let place = match &backend {
            Backend::Memory => Place::Memory,
            Backend::Sqlite => Place::File(dir.path().join("ledger.db")),
            Backend::Postgres(url) => Place::Schema {
                url: url.clone(),
                schema: fresh_schema(),
            },
        };
        let ledger = Self::open_ledger(&place, &clock).await;
        Store {
            backend,
            clock,
            ledger,
            place,
            _dir: dir,
        }
    }

    async fn open_ledger(place: &Place, clock: &ManualClock) -> Arc<dyn Ledger> {
        match place {
            Place::Memory => Arc::new(MemoryLedger::new(
                Arc::new(clock.clone()),
                Retention::default(),
                Limits::default(),
            )),
            Place::File(path) => {
                let opts = SqliteOptions {
                    clock: Arc::new(clock.clone()),
                    ..SqliteOptions::default()
                };
                Arc::new(
                    SqliteLedger::open(path, opts)
                        .await
                        .expect("open sqlite ledger"),
                )
            }
            // A set but unreachable URL fails the test, never skips it.
            Place::Schema { url, schema } => {
                let opts = PostgresOptions {
                    clock: Arc::new(clock.clone()),
                    schema: Some(schema.clone()),
                    ..PostgresOptions::default()
                };
                Arc::new(
                    PostgresLedger::connect(url, opts)
                        .await
                        .unwrap_or_else(|e| {
                            panic!(
                                "HANDOVER_TEST_POSTGRES_URL is set but the ledger cannot open: {e}"
                            )
                        }),
                )
            }
        }
    }

    /// Whether a restart keeps what was recorded (false for memory).
    pub fn durable(&self) -> bool {
        !matches!(self.backend, Backend::Memory)
    }

    /// Simulates a process restart: the current ledger instance is dropped
    /// and a new one opens the same file. Everything built on the old
    /// instance (gates, reconcilers) must be rebuilt by the caller.
    pub async fn restart(&mut self) {
        assert!(self.durable(), "the memory ledger cannot survive a restart");
        self.ledger = Self::open_ledger(&self.place, &self.clock).await;
    }

    /// Another, independent ledger instance on the same store (as a second
    /// process or replica would have). For memory: the same instance.
    pub async fn second_instance(&self) -> Arc<dyn Ledger> {
        match self.backend {
            Backend::Memory => self.ledger.clone(),
            _ => Self::open_ledger(&self.place, &self.clock).await,
        }
    }

    /// The current ledger instance.
    pub fn ledger(&self) -> Arc<dyn Ledger> {
        self.ledger.clone()
    }

    /// A write gate over the current ledger instance.
    pub fn gate(&self, config: &Config, holder: &str) -> WriteGate {
        WriteGate::new(self.ledger(), config.clone(), Arc::new(self.clock.clone()))
            .with_holder(holder)
    }

    /// Moves the business clock (ledger and destination) forward.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// The record of `(scope, key)`.
    pub async fn record(&self, scope: &str, key: &str) -> OperationRecord {
        let id = OperationId::new(scope, key).expect("valid identity");
        self.ledger
            .get(&id)
            .await
            .expect("ledger reachable")
            .unwrap_or_else(|| panic!("no operation {scope}/{key} in the ledger"))
    }

    /// Every operation in the ledger.
    pub async fn all(&self) -> Vec<OperationRecord> {
        self.ledger
            .list(&ListFilter::default())
            .await
            .expect("ledger reachable")
    }
}
