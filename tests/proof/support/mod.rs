//! Shared helpers of the proof suite: the ledger per backend (with
//! restarts), the application's glue (config, approval, executor, lookup)
//! and the scoreboard the metrics report is computed from.

#![allow(dead_code)]

pub mod app;
pub mod score;
pub mod store;

use std::sync::Arc;

pub use app::*;
pub use score::Scoreboard;
pub use store::{Backend, Store};

/// How a scenario runs: on which backend, whether it restarts the process
/// at its critical point, and where it reports its metrics.
#[derive(Debug, Clone)]
pub struct Run {
    /// The ledger backend.
    pub backend: Backend,
    /// Restart the process (reopen the ledger) at the critical point.
    pub restart: bool,
    /// Where the scenario reports tasks and effects.
    pub score: Arc<Scoreboard>,
}

impl Run {
    /// A run with its own scoreboard.
    pub fn new(backend: Backend, restart: bool) -> Self {
        Self {
            backend,
            restart,
            score: Arc::new(Scoreboard::default()),
        }
    }

    /// A run reporting into `score`.
    pub fn reporting(backend: Backend, restart: bool, score: &Arc<Scoreboard>) -> Self {
        Self {
            backend,
            restart,
            score: score.clone(),
        }
    }

    /// A fresh store on this run's backend.
    pub async fn store(&self) -> Store {
        Store::open(self.backend.clone()).await
    }

    /// Restarts the process if this run asks for it; true if it did.
    pub async fn maybe_restart(&self, store: &mut Store) -> bool {
        if self.restart {
            store.restart().await;
        }
        self.restart
    }

    /// Closes the scenario: adds its effects and operations to the
    /// scoreboard and checks the promise — no effect beyond one per
    /// operation.
    pub async fn settle(&self, store: &Store, dest: Option<&handover_testkit::MockDestination>) {
        let before = self.score.totals().duplicates;
        self.score.settle(store, dest).await;
        assert_eq!(
            self.score.totals().duplicates,
            before,
            "a destination applied an operation more than once"
        );
    }
}
